"""streams/live"""
