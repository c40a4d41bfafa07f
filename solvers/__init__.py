"""duetto solvers."""
