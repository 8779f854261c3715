"""What a process knows: the registry's named tables (sections, WB methods, limit groups,
datasets, queues) and the plugins that declare into them through entry points.
"""
