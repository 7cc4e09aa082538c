"""Engines that answer the request files of `relgrade batch export` (`relgrade batch run`): Ray
Data over relgrade's own request function, or vLLM run-batch per file."""
