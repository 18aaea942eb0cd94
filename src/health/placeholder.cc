// Filled in by the work in progress; keeps the build whole.
