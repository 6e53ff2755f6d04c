"""Faust's table manager, minus its recovery of tables whose owner restores them itself.

The engine writes its state table's changelog in Kafka transactions of its own (see
faust_app), so that changelog ends with transaction markers. Faust's recovery outside
its exactly_once mode waits for a record at the last offset before the high-water mark,
and a marker is never delivered: it waits forever ("No event received for active tp").
Nor could it be trusted to stop at the right place: it reads uncommitted data, aborted
transactions included. The engine reads the state itself, read_committed, after fencing
the partition's previous owner.

So for the changelog topics named in the app's `self_recovered_topics`, recovery is told
there is nothing to read: the high-water it aims at is where it stands. Other tables
recover as usual. Chosen with the app setting `TableManager=SelfRecoveringTables`.
"""

from __future__ import annotations

from faust.tables.manager import TableManager
from faust.tables.recovery import Recovery


class _Recovery(Recovery):
    async def _build_offsets(self, consumer, tps, destination, title: str) -> None:
        await super()._build_offsets(consumer, tps, destination, title)
        ours = getattr(self.app, "self_recovered_topics", ())
        if destination is self.active_offsets:
            for tp in tps:
                if tp.topic in ours:
                    self.active_highwaters[tp] = destination[tp]


class SelfRecoveringTables(TableManager):
    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = _Recovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
