"""Jobs: the BullMQ adapter, the failure policy, the reschedule service and the fan-out; the only
package of wbsync that imports ``bullmq``.

The adapter's parts: ``model`` (job ids, results, outcomes), ``handle`` (what a processor gets),
``queue`` (the producer and inspector of one queue), ``views`` (reads over many queues),
``bullmq_worker`` (BullMQ's worker made to treat Redis as infrastructure) and ``worker`` (the
worker of one queue).
"""
