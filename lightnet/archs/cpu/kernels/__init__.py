"""The numpy kernel library: what op descriptions call from their `run` snippets.

Every kernel writes into the destination arrays it is given (arena views planned
before the model runs) and returns None. What shape an op's output has is
lightnet.ir.shapes'.
"""

from lightnet.archs.cpu.kernels.array import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.conv import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.detection import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.einsum import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.elementwise import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.fused import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.elements import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.io import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.linalg import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.logic import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.norm import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.pad import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.pool import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.quant import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.recurrent import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.reduce import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.grid_sample import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.interpolate import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.resample import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.scratch import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.sort import *  # noqa: F401,F403
from lightnet.archs.cpu.kernels.special import *  # noqa: F401,F403
