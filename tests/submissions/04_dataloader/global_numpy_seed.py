# solution: seed-numpy-worker
# fails: worker-init-fork worker-init-spawn
# says: cloned Generator
def seed_numpy_worker(worker_id):
    """worker_init_fn: reseed this worker's dataset.rng."""
    np.random.seed(get_worker_info().seed % 2**32)  # seeds np.random, not the dataset's own Generator
