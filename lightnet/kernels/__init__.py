"""The numpy kernel library: what op descriptions call from their `run` snippets.

Every kernel writes into the destination arrays it is given (arena views planned
before the model runs) and returns None. Shape helpers used by descriptions at
check time live beside the kernels they describe.
"""

from lightnet.kernels.array import *  # noqa: F401,F403
from lightnet.kernels.conv import *  # noqa: F401,F403
from lightnet.kernels.detection import *  # noqa: F401,F403
from lightnet.kernels.einsum import *  # noqa: F401,F403
from lightnet.kernels.elementwise import *  # noqa: F401,F403
from lightnet.kernels.fused import *  # noqa: F401,F403
from lightnet.kernels.io import *  # noqa: F401,F403
from lightnet.kernels.linalg import *  # noqa: F401,F403
from lightnet.kernels.norm import *  # noqa: F401,F403
from lightnet.kernels.pad import *  # noqa: F401,F403
from lightnet.kernels.pool import *  # noqa: F401,F403
from lightnet.kernels.reduce import *  # noqa: F401,F403
from lightnet.kernels.resample import *  # noqa: F401,F403
from lightnet.kernels.scratch import *  # noqa: F401,F403
from lightnet.kernels.sort import *  # noqa: F401,F403
from lightnet.kernels.special import *  # noqa: F401,F403
