"""streams/kafka"""
