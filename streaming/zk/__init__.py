"""ZooKeeper bridges on the driver: broker liveness and the admin paths turned into controller events, and the
snapshot reader a new controller starts from."""
