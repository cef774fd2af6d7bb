"""A block function slow enough to watch: used by the live-display tests."""
import time


def sleepy(data, block):
    time.sleep(0.04)
    return data
