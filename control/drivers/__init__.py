"""Actuator drivers: Modbus TCP relay boards (write, read back, confirm) and the HTTP node
command queue. The runner hands each a list of targets and gets one result per actuator."""
