"""Result records, straggler attribution and human-readable summaries."""
