"""emoncms's own semantics over our store: its request parameters and PHP date strings, its
read answers, and its feed files brought in by an import."""
