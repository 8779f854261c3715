"""Operations on cabinets, built on the runtime, the syncs, the client and the store: the day-one
check, bulk import, suspension of what WB refuses for good, penalties, export and pruning.
"""
