"""How sidewatch is reached: the HTTP API and its pages, the JetStream consumer, the scheduler
and the wiring of `sidewatch serve`. What they do is the application layer's (sidewatch.app)."""
