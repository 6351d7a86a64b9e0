#!/usr/bin/env python3
"""An OTLP profiles receiver for pmcpush's tests, written against PyPI's opentelemetry-proto
(Python classes protoc generated from the OpenTelemetry definitions) and grpcio: a decoder
independent of the Rust one, so the two can be checked to agree.

    otlp_receiver.py grpc|http COUNT

Listens on 127.0.0.1 (a free port), prints `port N`, takes COUNT export requests
(gRPC `ProfilesService/Export`, or HTTP `POST /v1development/profiles` with a protobuf body),
prints what each holds, one fact a line, then `end`, and exits. Exits 3 with `missing: NAME`
when a package is not installed, and by itself after 60 s whatever happens.
"""

import gzip
import sys
import threading

try:
    import grpc
    from opentelemetry.proto.collector.profiles.v1development import (
        profiles_service_pb2 as service,
        profiles_service_pb2_grpc as service_grpc,
    )
except ImportError as error:
    print(f"missing: {error.name}", flush=True)
    sys.exit(3)

from concurrent import futures
from http.server import BaseHTTPRequestHandler, HTTPServer

BUILD_ID = "process.executable.build_id.gnu"


def text(value):
    """An AnyValue as text (the attributes pmcpush sends are strings and integers)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return str(value.int_value)
    return repr(value)


def summarize(request):
    """The facts the tests compare, read through the request's dictionary."""
    d = request.dictionary
    s = d.string_table.__getitem__
    lines = []
    resource_profiles = request.resource_profiles[0]
    for kv in sorted(resource_profiles.resource.attributes, key=lambda kv: kv.key):
        lines.append(f"resource {kv.key}={text(kv.value)}")
    for m in d.mapping_table[1:]:
        build_id = next(
            (
                text(d.attribute_table[i].value)
                for i in m.attribute_indices
                if s(d.attribute_table[i].key_strindex) == BUILD_ID
            ),
            "",
        )
        lines.append(
            f"mapping {s(m.filename_strindex)} {m.memory_start:#x} {m.memory_limit:#x} "
            f"{m.file_offset:#x} {build_id}"
        )
    for p in resource_profiles.scope_profiles[0].profiles:
        lines.append(
            f"profile {s(p.sample_type.type_strindex)}/{s(p.sample_type.unit_strindex)} "
            f"time={p.time_unix_nano} duration={p.duration_nano} "
            f"period={s(p.period_type.type_strindex)}/{p.period}"
        )
        totals = {}
        for sample in p.samples:
            locations = d.stack_table[sample.stack_index].location_indices
            names = [
                s(d.function_table[d.location_table[i].lines[0].function_index].name_strindex)
                for i in locations
            ]
            key = ";".join(reversed(names))
            totals[key] = totals.get(key, 0) + sum(sample.values)
        for key in sorted(totals):
            lines.append(f"sample {key} {totals[key]}")
        for i in p.attribute_indices:
            a = d.attribute_table[i]
            lines.append(f"attribute {s(a.key_strindex)}={text(a.value)}")
    return lines


class Collector:
    """Prints each request's summary; sets `done` after `count` of them."""

    def __init__(self, count):
        self.count = count
        self.lock = threading.Lock()
        self.done = threading.Event()

    def take(self, request):
        with self.lock:
            for line in summarize(request):
                print(line)
            print("end", flush=True)
            self.count -= 1
            if self.count == 0:
                self.done.set()


class GrpcService(service_grpc.ProfilesServiceServicer):
    def __init__(self, collector):
        self.collector = collector

    def Export(self, request, context):
        self.collector.take(request)
        return service.ExportProfilesServiceResponse()


def serve_grpc(collector):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    service_grpc.add_ProfilesServiceServicer_to_server(GrpcService(collector), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return port, lambda: server.stop(grace=1)


def serve_http(collector):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            if self.path != "/v1development/profiles" or (
                self.headers.get("content-type") != "application/x-protobuf"
            ):
                self.send_response(400)
                self.end_headers()
                return
            body = self.rfile.read(int(self.headers["content-length"]))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            request = service.ExportProfilesServiceRequest()
            request.ParseFromString(body)
            reply = service.ExportProfilesServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
            self.wfile.flush()
            collector.take(request)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1], server.shutdown


def main():
    protocol, count = sys.argv[1], int(sys.argv[2])
    collector = Collector(count)
    port, stop = (serve_grpc if protocol == "grpc" else serve_http)(collector)
    print(f"port {port}", flush=True)
    finished = collector.done.wait(timeout=60)
    stop()
    sys.exit(0 if finished else 1)


if __name__ == "__main__":
    main()
