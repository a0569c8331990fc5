"""Retrieval lanes: each ranks the workspace's chunks (or files) by one signal; `codeloupe.search` fuses them.

dense.py    chunk and file-skeleton cosine against the query's vector
lexical.py  Okapi BM25 over identifier-aware tokens and path terms (tokens.py)
symbols.py  identifiers named in the query, looked up among definitions
entity.py   issue mode: files by their path, symbol names and signatures
top.py      the best rows of a lane's scores (ties by row)
"""
