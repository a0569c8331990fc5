"""Every constant that ranking depends on, in one place, each with the measurement that set it.

Measured with `codeloupe eval ../shared/golden/public.json` (80 queries, four corpora, MiniLM int8) unless
noted. Tune on the whole set, never on one query; a change that lowers bundle recall or R@1 is a regression.
"""

from __future__ import annotations

# --- BM25 (Okapi). k1 in 1.2-1.5 is the field's range; b 0.75 standard.
BM25_K1 = 1.2
BM25_B = 0.75
# Re-checked per lane (chunks, files, summaries each with their own k1 in {.9, 1.2, 1.6} x b in {.3, .5, .75,
# .9}; bench/tune_ranking.py --folds 5, lexical): docpairs + docs dev (3,100 queries) R@1 .614 at these values,
# .612-.617 over every grid point, cross-validated .613 (chunks) / .617 (files) / .616 (summaries), the folds
# disagreeing on b; commits dev in full (381, files x summaries) .528, cross-validated .525. Not a lever:
# one pair for every lane stays. A file-length prior (a file's fused score times 1 + w x its length quantile
# among the workspace's code files - .5; 62% of commits dev fixed files are in the longest fifth) was not
# kept either: issue mode .649 -> .662 at w .02 but .623 at .05 and .558 at .1; questions dev CV R@1 .605 ->
# .609, test .615 -> .617 with docpairs test one query down and public R@1 .925 -> .912 at .05.

# --- Dense: chunk cosine plus the file skeleton's cosine (the field's validated starting point).
SKELETON_WEIGHT = 0.5  # measured: 0.3 -> R@1 .900, 0.5 -> .925, 0.75 -> .925 with Acc@5 .912 (vs .925)

# --- Reciprocal rank fusion.
RRF_K = 60
# Lane weights by query shape. Natural-language questions: BM25 (with path terms) is the stronger single lane
# on code (alone: R@1 .912 vs dense .750 on the public set) and dense breaks its ties. Measured with the
# per-channel int8 MiniLM (bench/tune_ranking.py, file-level fusion, skeleton 0.5), dense/lexical:
# 1.0/0.6 -> R@1 .900 Acc@5 .900; 1.0/1.0 -> .925/.900; 0.6/1.0 -> .925/.912; 0.5/1.0 -> .925/.925;
# 0.4/1.0 -> .925/.925. Identifier-shaped queries lean on the lexical and symbol lanes (0.6/1.0/1.2 and
# 1.0/1.0/1.0 tied); issue weights 1.0/0.6/0.3/0.3 gave Acc@5 .938 against .925 for 1.0/0.8/0.6/0.6.
LANE_WEIGHTS_NATURAL = {"dense": 0.5, "lexical": 1.0, "file": 0.3, "summary": 0.15, "symbol": 0.5, "entity": 0.0,
                        "feedback": 0.3}
LANE_WEIGHTS_IDENTIFIER = {"dense": 0.6, "lexical": 1.0, "file": 0.0, "summary": 0.0, "symbol": 1.2, "entity": 0.0}
LANE_WEIGHTS_ISSUE = {"dense": 1.0, "lexical": 0.6, "file": 0.6, "summary": 0.0, "symbol": 0.3, "entity": 0.3}
# The entity lane runs in issue mode only. For questions too (0.15-0.8), docpairs dev R@1 .627 -> .645-.653 and
# docs words (names as words) test .573 -> .615-.625, but docs dev .517 -> .476-.507 and commits dev Acc@5 .837 ->
# .803-.827, both built by stripping the names it matches (docs/measurements.md).
# The file lane (BM25 with one document per file, issue mode): a long report's words spread over a big
# file's chunks. Public issue queries (12), file weight 0 / 0.3 / 0.6 / 1.0: Acc@5 .917 / 1.0 / 1.0 / 1.0,
# MRR .889 / .896 / .903 / .903 (whole set R@1 .925 throughout). Commits dev (130, lexical), file 0 / 0.6 /
# 1.0: R@1 .500 / .515 / .515, Acc@5 .777 / .777 / .769.
# The project lane (docs, manifests, configuration; questions about versions, dependencies, flags,
# settings) proposes its top PROJECT_FILES as candidates without a vote: as a vote, weight 0.1 cost docpairs
# dev R@1 .004 (many doc comments say "options" or "config") and 0.3 cost public R@1 .025.
PROJECT_FILES = 5
# Pseudo-relevance feedback (questions): the top FEEDBACK_CHUNKS fused chunks lend the question their
# FEEDBACK_TERMS rarest shared terms, searched again by BM25 as the "feedback" lane.
FEEDBACK_CHUNKS = 3
FEEDBACK_TERMS = 8
TERM_SETS_KEPT = 4096  # chunks whose term sets a snapshot keeps for feedback (a few MB at most)
# Questions' file 0.3 / feedback 0.3 were chosen on docpairs dev (2814 doc-comment queries over 86 packages,
# lexical lanes, bench/tune_ranking.py --folds 5 over a grid of file {0, .3, .5} x feedback {0, .3} x the kind
# penalties below): 4 of 5 folds chose them; cross-validated R@1 .613 -> .616, Acc@5 .914 -> .922, bundle
# recall .980 -> .987. Re-chosen on docpairs dev + docs dev together (3100 queries, 115 packages): 4 of 5
# folds again chose file .3 + feedback .3 (over feedback alone, file alone, .15/.15). It is not free
# everywhere: lexical-only, docs dev R@1 .490 -> .483 and public .938 -> .925 (feedback alone would score
# .950 there); with the dense lane public R@1 is .938 (main .925).
# The summary lane (lanes.summary: BM25 over each file's skeleton plus the names its graph neighbours know it
# by). Questions 0.15, chosen on docpairs dev + docs dev (3100 queries, 115 packages, lexical,
# bench/tune_ranking.py --folds 5 over summary {0, .15, .3, .5} x a neighbour tie-breaker {0, .02, .05}):
# every fold chose a summary weight (.15 twice, .3 three times) and no tie-breaker; whole dev R@1 .608 -> .613
# for both .15 and .3 (MRR .740 -> .745), .15 ahead on Acc@5 (.918 vs .916; docs dev .850 vs .832);
# cross-validated R@1 .611, bundle recall .985 -> .989. Commits dev in full (381, lexical): R@1 .514 both,
# Acc@5 .795 -> .819, bundle .919 -> .929, MRR .655 -> .664. Bug reports (issue mode) 0: on the 77 dev
# commits that read as reports, summary .3 cost R@1 .649 -> .584 (every fold chose 0). Identifier-shaped
# queries: not measured, 0. Skeleton alone (no neighbour words) on two 12-package docpairs dev samples: R@1
# .644 / .660 against .663 / .656 with them.
# Not kept: a graph-neighbour tie-breaker (a file with evidence of its own lifted by up to 2-5% times its best
# one-hop neighbour's share of the top score) lost on every set: docpairs + docs dev R@1 .608 -> .601 (.02) /
# .584 (.05); commits dev sample .523 -> .515 / .485; the 77 report-shaped commits .649 -> .636 / .584. The
# top files' neighbours as extra candidates moved no bundle recall: bundle.py already adds them to RELATED.
# Not kept either, measured with the dense lane on (the embedded sample: 32 corpora x 20 queries per set, <= 300
# files; dev = docpairs + docs dev, 806 queries, bench/tune_ranking.py --folds 5; test = docpairs + docs test,
# 727): pseudo-relevance feedback in the model's space (the question's vector moved half-way towards the mean
# vector of the top 3 fused chunks, searched again as a lane) at 0.3 / 0.6, with and without the lexical
# feedback. Dev R@1 / Acc@5 / MRR .640 / .928 / .766 -> at best .643 / .933 / .771; 4 of 5 folds chose dense
# feedback .6 without the lexical one, but cross-validated R@1 stayed .640 and on test that choice lost Acc@5
# .931 -> .919 (R@1 .638 -> .640; public R@1 .938 both, Acc@5 .950 -> .975, MRR .965 -> .963), for a second
# matrix product per question. With the dense lane on, the lexical feedback is nearly neutral (dev R@1 .638
# without it, test .638 both ways).
# The dense-on constants re-checked this round on a second embedded sample (20 corpora x 20 queries per set,
# <= 300 files, --folds 5; dev 535 questions / 124 report-shaped queries, test 640 with public and commits
# test): the kind penalties (questions and issue mode) - every fold chose a stronger set, dev R@1 level at .647
# / .621, test level at .661; questions' dense {.3, .5, .8} x lexical feedback {0, .3} - every fold kept dense
# .5 and dropped the feedback (CV R@1 .647 -> .650), but on test that lost (.661 -> .658); issue weights - folds chose dense 1.0-1.4 / lexical .4-.6 / file .3, CV R@1 .621 -> .637 but on test
# Acc@5 .953 -> .918 / .941 with R@1 .671 -> .682 / .671 (85 queries), public level. All kept as they are.
# Only the top of each lane takes part in fusion: deep tails of four lanes add noise, not recall.
# Not kept: a query's adjacent plain words joined as one more term ("code spans" -> the code's `codespan`, a word
# no tokenising splits), lexical, every query of each set. Docpairs dev R@1 .626 -> .629, commits test .570 ->
# .576 (Acc@5 .855 -> .867, bundle .976 -> .982), commits dev level, but docs dev .500 -> .493: the joined word
# is as often a common identifier's (`SortedList` for "sorted list" helped, `SystemMessage` for "system messages"
# hurt). Only where most chunks holding it lack one of the two words: docpairs .627, docs .497, commits test
# .576 / .861. Every fold chose the unconditional form; neither leaves every set level or better.
LANE_DEPTH = 200
# A store that scores BM25 itself (PostgreSQL) hands the lexical lane its best chunks, not every chunk's score;
# the search then masks them (mode, scope) and keeps LANE_DEPTH. bench/pg_lexical.py kept the in-process R@1
# exactly at 1000 over the public golden set.
INDEXED_LEXICAL_DEPTH = 1000

# --- Symbol lane: how much one query word's match is worth, by the word's shape.
SYMBOL_QUALIFIED = 4.0  # `Context.invoke`, `Foo::bar`
SYMBOL_EXACT_IDENTIFIER = 3.0  # `getUserById` defined with exactly that case
SYMBOL_CASELESS_IDENTIFIER = 1.5
# A plain English word inside a sentence ("option" -> `class Option`): 0.6 measured R@1 .775, 0.0 measured
# .912 (with the lane at 0.5 for natural-language queries). Symbol names are also common words, so a
# sentence's words drown the lane in definitions of `value`, `read`, `name`.
SYMBOL_PLAIN_WORD = 0.0

# --- Penalties and boosts.
# Soft penalties by file kind (codeloupe.search.file_kind), multiplied into fused scores; never a drop.
# Questions: tests and fixtures answer "how is X tested", rarely "how does X work". Chosen on docpairs dev with
# the lane weights above (every fold chose the strongest of {test .85}, {.7/.8/.7/.8}, {.6/.7/.6/.6}: dev
# R@1 +.005, Acc@5 +.005); public unchanged. The dev set never has a test, example or declaration as gold,
# so it cannot ask for less; the public set, which can, is the guard.
# Manifests and configuration ("project") 0.7: a bug report too short for issue mode (most commit messages) is
# searched as a question, and CI workflows and pyproject.toml repeating its words took first place. Commits dev
# (381, lexical, bench/tune_ranking.py --folds 5 over project {1, .85, .7, .5}): R@1 .514 -> .528, Acc@5 .827
# -> .832, MRR .666 -> .675 for .7 and .5 alike (4 folds chose .5 by under .001 of MRR; .7 is the milder);
# commits test Acc@5 .842 -> .855; docpairs dev/test, docs dev/test and public level or up at .7 (README).
# Project questions still reach manifests and docs through the project lane (candidates, no vote).
# Release notes, licences, author lists and a package's PKG-INFO ("record") 0.9, unless the question asks about
# releases, versions, licences or people (search._RECORD_QUESTION): a changelog names every feature, so it took
# first place for 13 of the 286 docs dev questions. Docs dev (lexical, bench/tune_ranking.py --folds 5 over
# record {1, .8, .6, .4}, then {1, .9, .8}): R@1 .500 -> .507, MRR .648 -> .655 alike for every value below 1
# (every fold chose the mildest, .8; .9 is as good), docs test .491 -> .497, Acc@5 .828 -> .834; public level.
# The docs sets never take a record as gold (bench/devsets/docs_pairs.py leaves them out), so they cannot ask
# for less; the public set's release question (express's History.md) is the guard, through the exemption.
FILE_KIND_PENALTY = {"test": 0.6, "example": 0.7, "declaration": 0.6, "data": 0.6, "project": 0.7, "record": 0.9}
# Bug reports quote warnings that gettext catalogs repeat and APIs that tests and doc examples call. Chosen on
# commits dev (bug-fix commit message -> fixed files, 5 per repository = 130 instances over 26 repositories,
# lexical, 5-fold CV): 4 of 5 folds chose the strongest of {test .85}, {.6/.7/.6/.5}, {.4/.5/.5/.3}; R@1
# .515 -> .523 in-sample, level cross-validated (one instance a fold). Public unchanged.
# Manifests and configuration ("project": pyproject.toml, CI workflows, .pre-commit-config.yaml) share a
# report's words (package, version, option names) and took 1st-3rd places over the fixed code. Chosen on the
# 77 commits dev messages issue mode reads as reports (bench/tune_ranking.py --issue-mode --folds 5, lexical,
# project {1, .7, .5, .3}): 4 of 5 folds chose .5; Acc@5 .870 -> .909 (.896 cross-validated), R@1 level, MRR
# .763 -> .767. As for tests, the set cannot ask for less (its gold files are code by construction). Records
# are prose, which a report searched in code mode never meets: none here.
FILE_KIND_PENALTY_ISSUE = {"test": 0.4, "example": 0.5, "declaration": 0.5, "data": 0.3, "project": 0.5}
# A query word that is the file's stem (short queries only): a tie-breaker that can swap neighbours, not leap
# ranks (adjacent RRF ranks at the top differ by ~1.6%). 0.10 let ranking.py beat search.py ranked first by
# both lanes for "how are lanes fused by reciprocal rank"; 0.02 -> R@1 .925, Acc@5 .938 (0.10: .925/.925).
FILENAME_BOOST = 0.02
SHORT_QUERY_WORDS = 8

# --- A learned reordering of a question's fused top (issue 13): the first RERANK_TOP fused files (after the
# penalties above) are put in the order of a linear score of what the lanes already computed, and take the fused
# scores of those places in that order (the bundle keeps every file; CORE's gap rule sees the same scores). Each
# weight multiplies a feature of `search.rerank_features`: the fused score over the first file's; the file's
# best dense cosine minus the dense lane's first (RERANK_DENSE_UNRANKED where the lane did not rank it); its best
# chunk's BM25, its summary's and its file-level BM25 each over that lane's first (0 where unranked); 1 if a
# query word is a stem of its file name; its folder depth. Fitted by `bench/learned_rerank.py fit` (listwise
# logistic regression, L2 .01 towards the fused order, top 10) on docpairs / docs / docs words dev
# (--corpora-per-set 40 --queries-per-corpus 0 --max-files 300) and the written dev set, 1,767 queries; 5-fold
# cross-validation by package: dev R@1 .662 -> .688, MRR .781 -> .799; held-out written .792 -> .812 (MRR .874
# -> .886); docpairs / docs / docs words test up; public R@1 .938 level, Acc@5 .950 -> .975, MRR .965 -> .963
# (docs/measurements.md). Questions in code mode only: docs mode and bug reports (issue mode) keep the fused order.
RERANK_TOP = 10
RERANK_DENSE_UNRANKED = -0.3
RERANK_WEIGHTS = {"fused": 9.8863, "dense": 5.6294, "lexical": 2.0843, "summary": 0.8165, "file": 0.4483,
                  "stem": 0.5781, "depth": -0.3827}

# --- Issue mode: a pasted bug report.
# Past this many words a query reads as a report. 15 and 10 lift commits dev R@1 .538 -> .554 and docpairs
# .627 -> .630 / .641 but cost docs dev .517 -> .510 / .514 (Acc@5 .857 -> .846 / .843), and 37 of the 52 public
# short questions are longer than 15 words (docs/measurements.md).
ISSUE_MIN_IDENTIFIERS = 25
FRAME_BONUS = 0.5  # a file named by a traceback frame...
FRAME_DEPTH_DECAY = 0.8  # ...times this per workspace file between it and the failure (0.8 and 0.6: R@1 .912, 1.0: .900)
PATH_MENTION_BONUS = 0.3  # a file named by an explicit path in the text
BACKTICK_BONUS = 0.15  # a definition named in `backticks`
FRAME_FUNCTION_BONUS = 0.2  # the chunk enclosing the frame's line
FULL_TEXT_VARIANT_WEIGHT = 2.0
# The variants searched beside the full text. Commits dev / test report-shaped messages (77 / 28, lexical,
# bench/tune_ranking.py --issue-mode): without the identifier bag (a third of the lexical work) Acc@5 .909 ->
# .883 / .893 -> .857; without the title R@1 .649 -> .662 but Acc@5 -> .857 and cross-validated R@1 .636.
ISSUE_VARIANTS = ("title", "trace", "fenced", "identifiers")
# The variants the dense lane embeds (a question is the one variant "query"; a report's are full, title,
# trace, fenced, identifiers); all of them go through the lexical lanes. The model is most of a report's time
# (bench/issue_latency.py, public issue queries, p50 total / R@1 of the whole set):
# all five 124 ms / .925; full+title 96 ms / .938; title+trace 19.5 ms / .938 (the identifier bag was the
# variant that cost a query: it reads like every file at once). Those repeats were answered by the provider's
# memo of query vectors; a report new to the model (bench/issue_latency.py on the commits dev set's 12 longest
# reports, median 102 words, over its 4 largest trees and docutils' 769 files): p50 20-32 ms at load 2-7,
# 43-47 ms at load 11-13 on 2 cores, a third of it the model, the rest lanes and bundle in equal parts.
DENSE_VARIANTS = frozenset({"query", "title", "trace"})

# --- Freshness: after a change, changed files are searched beside the last full snapshot (a delta view) and
# the full snapshot is rebuilt once the index has been quiet this long (a rebuild re-tokenises every chunk:
# ~4 s of CPU on the standard library, which competes with an editing session). Past DELTA_MAX_FILES
# changed files (a branch switch, the first index) the view leaves the rest out and the rebuild comes sooner.
REBUILD_QUIET_S = 10.0
PENDING_QUIET_S = 1.0
DELTA_MAX_FILES = 200

# --- Bundle.
CANDIDATE_FILES = 12
# A search across more repositories of one shared index than this first asks the lexical and dense lanes of all
# of them in the database and searches in full only this many, those whose chunks rank first
# (`repository_choice`): a latency budget, not a quality constant (the full search of 10 repositories of 4,140
# chunks took about 1 s, of 20 of 11,818 chunks 3.2 s p50: docs/org-scale-measurements.md).
REPOSITORIES_SEARCHED_FULLY = 8
# Of the repositories such searches chose, the snapshots of the most recently chosen this many stay in memory
# (about 50 MB each at 4,140 chunks, 160 MB at 11,818); the others' are let go and loaded again when chosen.
SHARED_SNAPSHOTS_HELD = 16
# The lexical evidence for that choice scores the query's this many rarest terms: a cost bound (a bug report's
# dozens of common words are most of the postings and weigh least), above a question's usual count.
REPOSITORY_CHOICE_TERMS = 16
CORE_GAP = 0.03  # CORE = files within 3% of the leader
CORE_MAX = 4
CORE_CHUNK_RATIO = 0.80  # a CORE file shows every chunk scoring >= 80% of its best
GRAPH_NEIGHBOURS = 7
# Completeness (rule 2): every file any lane ranked (each lane's LANE_DEPTH list) is in the bundle. Past the
# limit they are RELATED map lines with no snippet: first the files some lane ranks in its top
# BUNDLE_LANE_TOP_K, then every file linked to CORE through the code the query matched (a safety cap, not a
# cut: a definition called from hundreds of files is rendered as its first GRAPH_SYMBOL_LINKS_MAX callers),
# then the rest (`FileHit.tail`). Cutting at the lanes' top 10 lost 75 of the 82 gold files missing from
# bundles on the dev/test sets (lexical); keeping the tail took bundle recall to .999/.999/.990/.994
# (docpairs dev/test, docs dev/test) for 2.7x the files, none of them read to render.
BUNDLE_LANE_TOP_K = 10
GRAPH_SYMBOL_LINKS_MAX = 40
SNIPPET_RADIUS = 15
SNIPPET_TERMS = 6  # the query's rarest terms pick a snippet's anchor line
