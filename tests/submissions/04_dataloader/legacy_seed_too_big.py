# solution: seed-numpy-worker
# fails: worker-init-fork worker-init-spawn
# says: raised ValueError
def seed_numpy_worker(worker_id):
    """worker_init_fn: reseed this worker's dataset.rng."""
    info = get_worker_info()
    np.random.seed(info.seed)  # torch's seed is 64-bit; np.random.seed takes only seeds below 2**32
    info.dataset.rng = np.random
