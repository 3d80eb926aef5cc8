# solution: seed-numpy-worker
# fails: worker-init-fork worker-init-spawn
# says: NumPy Generator
def seed_numpy_worker(worker_id):
    """worker_init_fn: reseed this worker's dataset.rng."""
    info = get_worker_info()
    info.dataset.rng = np.random.seed(info.seed % 2**32)  # np.random.seed returns None: rng is no Generator
