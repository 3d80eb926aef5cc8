# solution: seed-numpy-worker
# fails: worker-init-fork worker-init-spawn
# says: cloned Generator
def seed_numpy_worker(worker_id):
    """worker_init_fn: reseed this worker's dataset.rng."""
    rng = np.random.default_rng(get_worker_info().seed)  # made, but never given to the dataset
