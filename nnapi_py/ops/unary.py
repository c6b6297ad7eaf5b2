"""(not yet written)"""
