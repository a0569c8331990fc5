"""Every constant that ranking depends on, in one place, each with the measurement that set it.

Measured with `codeloupe eval ../shared/golden/public.json` (80 queries, four corpora, MiniLM int8) unless
noted. Tune on the whole set, never on one query; a change that lowers bundle recall or R@1 is a regression.
"""

from __future__ import annotations

# --- BM25 (Okapi). k1 in 1.2-1.5 is the field's range; b 0.75 standard.
BM25_K1 = 1.2
BM25_B = 0.75

# --- Dense: chunk cosine plus the file skeleton's cosine (the field's validated starting point).
SKELETON_WEIGHT = 0.5

# --- Reciprocal rank fusion.
RRF_K = 60
# Lane weights by query shape. An equal-weight BM25+MiniLM fusion measured slightly worse than dense alone on
# query->function in the bakeoff, so natural-language questions lean dense; identifier-shaped queries lean on
# the lexical and symbol lanes.
LANE_WEIGHTS_NATURAL = {"dense": 1.0, "lexical": 0.6, "symbol": 0.5, "entity": 0.0}
LANE_WEIGHTS_IDENTIFIER = {"dense": 0.6, "lexical": 1.0, "symbol": 1.2, "entity": 0.0}
LANE_WEIGHTS_ISSUE = {"dense": 1.0, "lexical": 0.8, "symbol": 0.6, "entity": 0.6}
# Only the top of each lane takes part in fusion: deep tails of four lanes add noise, not recall.
LANE_DEPTH = 200

# --- Files rank by their best chunk; further matching chunks add a saturating bonus, so one large file
# cannot fill the top by volume but a file that matches in several places edges out a one-hit file.
EXTRA_CHUNK_BONUS = 0.15
EXTRA_CHUNK_LIMIT = 3

# --- Penalties and boosts.
TEST_PENALTY = 0.85  # tests and fixtures answer "how is X tested", rarely "how does X work"
FILENAME_BOOST = 0.10  # a query word that is the file's stem (short queries only), capped
SHORT_QUERY_WORDS = 8

# --- Issue mode: a pasted bug report.
ISSUE_MIN_IDENTIFIERS = 25
FRAME_BONUS = 0.5  # a file named by a traceback frame
PATH_MENTION_BONUS = 0.3  # a file named by an explicit path in the text
BACKTICK_BONUS = 0.15  # a definition named in `backticks`
FRAME_FUNCTION_BONUS = 0.2  # the chunk enclosing the frame's line
FULL_TEXT_VARIANT_WEIGHT = 2.0

# --- Bundle.
CANDIDATE_FILES = 12
CORE_GAP = 0.03  # CORE = files within 3% of the leader
CORE_MAX = 4
CORE_CHUNK_RATIO = 0.80  # a CORE file shows every chunk scoring >= 80% of its best
GRAPH_NEIGHBOURS = 7
SNIPPET_RADIUS = 15
SNIPPET_TERMS = 6  # the query's rarest terms pick a snippet's anchor line
