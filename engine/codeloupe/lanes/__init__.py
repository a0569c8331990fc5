"""Retrieval lanes: each ranks every chunk of the workspace by one signal."""
