"""One module per pipeline, each with NAME, HELP, add_arguments(parser) and run(spark, args)."""
