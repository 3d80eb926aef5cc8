# solution: seed-numpy-worker
# fails: worker-init-fork
# says: not reproducible
def seed_numpy_worker(worker_id):
    """worker_init_fn: reseed this worker's dataset.rng."""
    get_worker_info().dataset.rng = np.random.default_rng()  # different every run: not reproducible
