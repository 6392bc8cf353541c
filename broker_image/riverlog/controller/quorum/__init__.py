"""The durable, asyncio side of the KRaft-style metadata quorum: storage and driver."""
