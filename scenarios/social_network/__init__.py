"""Social network: posts, likes, replies and follows on a growing graph, fed by a recommender."""
