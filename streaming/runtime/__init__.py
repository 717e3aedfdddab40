"""What the rest of the job stands on: files beside Spark's checkpoint, the garbage collector paused, work on a
background thread, and livectl's own Spark flags."""
