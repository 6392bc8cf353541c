"""The few API server requests the agent makes, as plain JSON dicts over the ``kubernetes``
package's authenticated HTTP client (the typed models would add nothing here)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client, config


class NotFound(Exception):
    pass


class Conflict(Exception):
    pass


class KubeApi:
    def __init__(self, kubeconfig: str) -> None:
        self._api = config.new_client_from_config(config_file=kubeconfig)
        self.server: str = self._api.configuration.host

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                query: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        method_, url, headers, body_, post = self._api.param_serialize(
            method, path, query_params=query or [], body=body, auth_settings=["BearerToken"],
            header_params={"Content-Type": content_type, "Accept": "application/json"},
        )
        resp = self._api.call_api(method_, url, header_params=headers, body=body_, post_params=post,
                                  _request_timeout=30)
        data = resp.read()
        if resp.status == 404:
            raise NotFound(path)
        if resp.status == 409:
            raise Conflict(path)
        if resp.status >= 400:
            raise client.ApiException(status=resp.status, reason=f"{method} {path}: {data[:500]!r}")
        return json.loads(data) if data else {}

    def get(self, path: str, query: list[tuple[str, str]] | None = None) -> dict[str, Any]:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any) -> dict[str, Any]:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> dict[str, Any]:
        return self.request("PUT", path, body)

    def merge_patch(self, path: str, body: Any) -> dict[str, Any]:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str, body: Any = None) -> dict[str, Any]:
        return self.request("DELETE", path, body)

    def close(self) -> None:
        self._api.close()
