"""Analysis of evaluated runs: paired statistics, the comparison report, convergence."""
