from framejit import _C
