"""An async client of the Ray dashboard's job REST API: submit, stop and delete job submissions.

    async with DashboardClient("http://head-svc.ns.svc:8265", token=token) as dashboard:
        submission_id = await dashboard.submit(SubmitRequest.from_rayjob_spec(spec, job_id))
        await dashboard.stop(submission_id)

Only what changes a job goes through the dashboard (where Ray's job manager runs); a job's status
is read from the GCS (``GcsClient.get_submission``), which keeps answering while the dashboard is
down or restarting.

Every call is safe to repeat, so a caller that lost an answer (a timeout, a dropped connection)
calls again:

- `submit` with a `submission_id`: Ray refuses a second job with an id it holds ("Job with
  submission_id ... already exists. Please use a different submission_id.", HTTP 500 from the
  dashboard, 400 from a job agent); that answer counts as success, as KubeRay counts it, so a
  retried submit never starts a second job. (Nor does it check that the job Ray holds is the
  same request.) Without a `submission_id` Ray makes up a new one each time;
- `stop` of a job that ended or that Ray does not know is False, not an error; a stop is
  asynchronous (Ray signals the job's supervisor; the GCS shows STOPPED once it has stopped), and
  a job still PENDING for resources stays PENDING: Ray 2.60 cannot reach its supervisor;
- `delete` of a job Ray does not know is False. Ray deletes only a finished job (STOPPED,
  SUCCEEDED, FAILED): deleting a live one is a `DashboardError`.

Failures: an answer that is an error raises `DashboardError` (`status` the HTTP status,
`message` Ray's reason: the last exception line of the traceback it sends back, or its text);
no answer (refused, timed out after `timeout` seconds, the connection dropped) raises
`DashboardUnavailable`, whose `status` is 0.

Token authentication (Ray >= 2.52, ``RAY_AUTH_MODE=token``): Ray's own ``JobSubmissionClient``
sends the header ``authorization: Bearer <token>``; so does this one when given `token` (the
dashboard also takes ``x-ray-authorization``, which KubeRay sends). A missing token is 401, a
wrong one 403.

Each call checks the write fence (``rayscale.fence``) first, as the GCS client's mutating calls
do.
"""

from __future__ import annotations

import json
import logging
import re
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import quote

import aiohttp

from rayscale.fence import WRITE_FENCE
from rayscale.ray.jobrequest import SubmitRequest

__all__ = ["DashboardClient", "DashboardError", "DashboardUnavailable", "SubmitRequest", "ray_message"]

log = logging.getLogger(__name__)

JOBS: Final = "/api/jobs/"
# What Ray answers to a second submit with a submission id it already holds (KubeRay looks for it).
ALREADY_EXISTS: Final = "Please use a different submission_id"
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*: \S")
_MAX_MESSAGE = 2000


class DashboardError(Exception):
    """A call to the Ray dashboard failed: it answered `status` with `message` (Ray's reason;
    `body` is the whole answer), or, for `DashboardUnavailable`, did not answer (status 0)."""

    def __init__(self, address: str, operation: str, status: int, message: str, body: str = "") -> None:
        answer = f"HTTP {status}" if status else "no answer"
        super().__init__(f"Ray dashboard {address}: {operation} failed: {answer}: {message}")
        self.address = address
        self.operation = operation
        self.status = status
        self.message = message
        self.body = body


class DashboardUnavailable(DashboardError):
    """No answer: the dashboard was unreachable, too slow (`timeout`), or dropped the connection.
    Whether the call took effect is unknown: repeat it."""

    def __init__(self, address: str, operation: str, message: str) -> None:
        super().__init__(address, operation, 0, message)


def ray_message(body: str) -> str:
    """Ray's reason in an error answer: the dashboard sends a Python traceback back (for a
    submit, often one wrapped in another), whose last exception line says what went wrong;
    otherwise the text itself ("Job x does not exist")."""
    lines = [line for line in body.splitlines() if _EXCEPTION_LINE.match(line)]
    text = lines[-1] if "Traceback (most recent call last)" in body and lines else body.strip()
    return text[:_MAX_MESSAGE]


class DashboardClient:
    """The job API of one Ray dashboard. Create and use it inside the event loop; ``close()``
    (or ``async with``)."""

    def __init__(self, address: str, *, token: str | None = None, timeout: float = 10.0) -> None:
        """`address`: ``http://host:port`` (``host:port`` means http); `timeout`: seconds per
        call, connecting included."""
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        self.address = (address if "://" in address else f"http://{address}").rstrip("/")
        self.timeout = timeout
        token = token.strip() if token is not None else None
        self._headers = {"authorization": f"Bearer {token}"} if token else {}
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def submit(self, request: SubmitRequest) -> str:
        """Submit a job; its submission id (the request's, or the one Ray made up). A job Ray
        already holds under the request's `submission_id` counts as submitted."""
        status, body = await self._request("POST", JOBS, "submit", request.to_json())
        if status == 200:
            answer = self._json("submit", status, body)
            submitted = answer.get("submission_id") or answer.get("job_id")
            if not isinstance(submitted, str) or not submitted:
                raise DashboardError(
                    self.address, "submit", status, f"no submission id in {body[:200]!r}", body
                )
            return submitted
        if request.submission_id and status in (400, 500) and ALREADY_EXISTS in body:
            log.debug("dashboard %s: job %s was submitted already", self.address, request.submission_id)
            return request.submission_id
        raise DashboardError(self.address, "submit", status, ray_message(body), body)

    async def stop(self, submission_id: str) -> bool:
        """Ask Ray to stop a job: True when it was running (it stops soon after), False when it
        had ended or Ray does not know it."""
        path = f"{JOBS}{quote(submission_id, safe='')}/stop"
        status, body = await self._request("POST", path, "stop")
        if status == 404:
            return False
        if status != 200:
            raise DashboardError(self.address, "stop", status, ray_message(body), body)
        return bool(self._json("stop", status, body).get("stopped"))

    async def delete(self, submission_id: str) -> bool:
        """Delete a finished job's record (and logs) from Ray: True when deleted, False when Ray
        does not know the job. A job that has not finished is a `DashboardError`."""
        status, body = await self._request("DELETE", f"{JOBS}{quote(submission_id, safe='')}", "delete")
        if status == 404:
            return False
        if status != 200:
            raise DashboardError(self.address, "delete", status, ray_message(body), body)
        return bool(self._json("delete", status, body).get("deleted"))

    def _json(self, operation: str, status: int, body: str) -> dict[str, Any]:
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise DashboardError(self.address, operation, status, f"not a JSON object: {body[:200]!r}", body)
        return answer

    async def _request(
        self, method: str, path: str, operation: str, body: dict[str, Any] | None = None
    ) -> tuple[int, str]:
        WRITE_FENCE.check(f"Ray dashboard {self.address} {operation}")
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        try:
            async with self._session.request(
                method, self.address + path, json=body, headers=self._headers
            ) as response:
                return response.status, await response.text(errors="replace")
        except TimeoutError:
            raise DashboardUnavailable(
                self.address, operation, f"no answer within {self.timeout:g}s"
            ) from None
        except aiohttp.ClientError as exc:
            raise DashboardUnavailable(self.address, operation, str(exc) or type(exc).__name__) from exc
