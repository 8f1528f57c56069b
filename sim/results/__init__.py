"""Result records and what reads them: the summary record (:mod:`moesim.results.result`), the
evidence records the simulators fill (:mod:`moesim.results.group_record`,
:mod:`moesim.results.walk_record`, :mod:`moesim.results.group_timeline`), and the readers that
are functions of them alone: straggler attribution, the critical path, the Chrome trace, the
saved run (:mod:`moesim.results.run_file`) and the human-readable summaries."""
