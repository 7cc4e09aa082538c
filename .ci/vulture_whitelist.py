"""Names vulture finds unused that are used, by whom (read by `vulture`: pyproject's
[tool.vulture]). Each line names an attribute or variable; `_` stands for any object. A name
here is never reported anywhere, so list only what a framework or a user calls by name."""

# http.server / socketserver call these by name (the annotate server).
_.close_connection
_.do_GET
_.do_POST
_.log_message
_.service_actions
daemon_threads
default_request_version
request_queue_size
server_version

# html.parser.HTMLParser calls these by name (tests/test_query_order.py).
_.handle_data
_.handle_endtag
_.handle_starttag

# The io protocol (file objects handed to readers that ask) and the import system (a meta path
# finder).
_.readable
_.writable
_.find_spec

# uvicorn reads it to stop (tests/fakeserver.py).
_.should_exit

# Public API for users, documented (docs/filling-holes.md, docs/python-api.md): not called
# inside the package.
_.shares_frame
_.transform  # relgrade.pyterrier.Grader, called by PyTerrier
__getattr__  # relgrade's lazy attributes (PEP 562)
_.__signature__  # relgrade.agrade's, grade's: read by inspect (help, IDEs)

# Fields of records written out whole (the calibrate JSON report's pydantic models, a batch
# job's row): read by the report's readers, not by name in the code.
bin
bucket
clustered_by
expected_grade_mae
grade_mae
human_count
human_counts
human_mean
human_only_ci
human_rank
krippendorff_alpha_interval
krippendorff_alpha_ordinal
labelled_clusters
llm_count
llm_counts
llm_mean
llm_rank
margin
mean_confidence
n_with_confidence
rank_change
resamples
second_only
updated_at
weighted_kappa_linear
weighted_kappa_quadratic
weighted_n
within_one

# Parameters a protocol fixes: __exit__'s traceback, a signal handler's number.
tb
signum

# pytest fixtures asked for by a test's parameters for what they set up, not their value.
no_env
no_whole_read
tiny_blocks

# An import for its side effect (registering a plug-in; tests/test_plugins.py).
tests

# httpx's Response reads its body from `_content` (set as `Response.aread` sets it).
_content

# Ray Data's DataContext options, set to turn its progress bars off and to keep blocks small
# (grader/batch/engines/ray_run.py).
enable_progress_bars
target_max_block_size

# Reply fields msgspec decodes, read by name (grader.judges.llm.grade_token.field).
prompt_tokens_details
