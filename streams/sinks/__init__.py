"""streams/sinks"""
