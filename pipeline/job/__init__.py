"""The Spark apply job: read a group's pending batches, split, route, partition by key,
apply on executors through the adapters, and ack on the driver only when all committed."""
