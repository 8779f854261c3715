"""Jobs: the BullMQ adapter, the reschedule service, workers and the fan-out."""
