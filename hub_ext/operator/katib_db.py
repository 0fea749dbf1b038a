"""A client of Katib's DB manager (``katib-db-manager``, gRPC ``api.v1.beta1.DBManager``) for the one
call the operator makes: ``GetObservationLog``, a Trial's metric logs as Katib's collectors stored
them.

The messages are declared here from Katib v0.19.0's ``pkg/apis/manager/v1beta1/api.proto`` (only
the five this call uses, with their field numbers; protobuf's descriptors, not generated code), and
the call goes through ``grpc.aio`` on an insecure channel, as Katib's own controller and collectors
reach the DB manager in a cluster. A call has a deadline; its failure raises `KatibDbError` with a
reason safe to log (the gRPC status and details, never the request).
"""

from __future__ import annotations

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

METHOD = "/api.v1.beta1.DBManager/GetObservationLog"
_STRING = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
_OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
# message -> (field, number, type, label, message type)
_MESSAGES = {
    "GetObservationLogRequest": [("trial_name", 1, _STRING, _OPTIONAL, ""), ("metric_name", 2, _STRING, _OPTIONAL, ""),
                                 ("start_time", 3, _STRING, _OPTIONAL, ""), ("end_time", 4, _STRING, _OPTIONAL, "")],
    "GetObservationLogReply": [("observation_log", 1, _MESSAGE, _OPTIONAL, "ObservationLog")],
    "ObservationLog": [("metric_logs", 1, _MESSAGE, _REPEATED, "MetricLog")],
    "MetricLog": [("time_stamp", 1, _STRING, _OPTIONAL, ""), ("metric", 2, _MESSAGE, _OPTIONAL, "Metric")],
    "Metric": [("name", 1, _STRING, _OPTIONAL, ""), ("value", 2, _STRING, _OPTIONAL, "")],
}


class KatibDbError(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _classes() -> tuple[type, type]:
    proto = descriptor_pb2.FileDescriptorProto(name="mlplatform/katib_db.proto", package="api.v1.beta1",
                                               syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field, number, kind, label, type_name in fields:
            message.field.add(name=field, number=number, type=kind, label=label,
                              type_name=f".api.v1.beta1.{type_name}" if type_name else None)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName("api.v1.beta1.GetObservationLogRequest")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName("api.v1.beta1.GetObservationLogReply")))


Request, Reply = _classes()


class KatibDb:
    """One channel to the DB manager at `address` (``host:port``), opened on first use."""

    def __init__(self, address: str, timeout_s: float = 10.0):
        self.address, self.timeout_s = address, timeout_s
        self._channel: grpc.aio.Channel | None = None

    async def metric_logs(self, trial: str, metric: str) -> list[tuple[str, str, str]]:
        """``(time stamp, metric, value)`` of every log of `metric` of `trial` Katib stored."""
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self.address)
        call = self._channel.unary_unary(METHOD, request_serializer=Request.SerializeToString,
                                         response_deserializer=Reply.FromString)
        try:
            reply = await call(Request(trial_name=trial, metric_name=metric), timeout=self.timeout_s)
        except grpc.aio.AioRpcError as e:
            raise KatibDbError(f"Katib's DB manager at {self.address} answered {e.code().name}: "
                               f"{(e.details() or '')[:300]}") from None
        return [(m.time_stamp, m.metric.name, m.metric.value) for m in reply.observation_log.metric_logs]

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
