"""streams/metrics"""
