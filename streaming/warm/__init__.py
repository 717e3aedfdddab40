"""Acceleration, kept apart from the controller's semantics: Python workers warmed before the query needs them
and the standby's read-ahead of ZooKeeper. Only :mod:`streaming.driver.app` starts them."""
