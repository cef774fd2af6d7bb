"""The Qt layer: the window, its three panes, and the pollers that feed them.

Everything here adapts core snapshots to Qt; no decision lives here that a
plain test of the core could not reach.
"""
