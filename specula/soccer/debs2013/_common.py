"""What the readers of the DEBS 2013 files share: path arguments and the halves' times."""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType

PathLike = str | os.PathLike[str]

#: Sensor time stamps (ps) of the start and end of each half, as published with the
#: DEBS 2013 Grand Challenge.
HALF_START_PS: Mapping[int, int] = MappingProxyType(
    {1: 10_753_295_594_424_116, 2: 13_086_639_146_403_495}
)
HALF_END_PS: Mapping[int, int] = MappingProxyType(
    {1: 12_557_295_594_424_116, 2: 14_879_639_146_403_495}
)
