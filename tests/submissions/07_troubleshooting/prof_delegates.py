# solution: profile-regions
# fails: profile-trace-names profile-slowest
# says: write it yourself
# calls the course's own profile_regions
from helpers import troubleshoot


def profile_regions(regions, trace_path):
    """The course's version."""
    return troubleshoot.profile_regions(regions, trace_path)
