"""Exports of a simulated step to the formats other tools read: a Chrome/Perfetto trace of
the whole step (:mod:`moesim.export.chrome_step`) and MLCommons Chakra execution traces, one
per rank, for ASTRA-sim (:mod:`moesim.export.chakra_et`); both from the one record of what each
rank did (:mod:`moesim.export.record`)."""
