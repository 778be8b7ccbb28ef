from framejit import _C
from framejit.dis import dis
