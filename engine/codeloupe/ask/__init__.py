"""`ask`: a model narrates the retrieval bundle by citing spans; the engine splices the code from disk.

The only package that calls a model (narrator, planner, agents, synthesiser, optional rerank), and every
call fails open to the plain bundle. See `run.run_ask` for the flow and `splice` for the grounding.
"""

from codeloupe.ask.events import AskEvent, AskResult, Citation
from codeloupe.ask.run import AskError, AskRun, run_ask

__all__ = ["AskError", "AskEvent", "AskResult", "AskRun", "Citation", "run_ask"]
