"""One error, every boundary's shape: deskrig.error_responses and the readers in deskrig.errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError

from deskrig.error_responses import (
    HTTP_STATUS,
    acs_envelope,
    error_body,
    http_error,
    tool_error_result,
)
from deskrig.errors import ErrorCode, ErrorInfo, http_error_info, invalid_argument, tool_error

FULL = ErrorInfo(
    code=ErrorCode.INVALID_REGION,
    message="region extends beyond the screen",
    details={"screen": {"width": 1280, "height": 800}},
    remediation="Give a region that lies on the screen.",
)
FULL_JSON = {
    "code": "INVALID_REGION",
    "message": "region extends beyond the screen",
    "details": {"screen": {"width": 1280, "height": 800}},
    "remediation": "Give a region that lies on the screen.",
}
#: No details, no remediation: the fields are left out, never sent as null.
BARE = ErrorInfo(code=ErrorCode.INTERNAL_ERROR, message="click failed unexpectedly")
BARE_JSON = {"code": "INTERNAL_ERROR", "message": "click failed unexpectedly"}


@pytest.mark.parametrize(("error", "wire"), [(FULL, FULL_JSON), (BARE, BARE_JSON)])
def test_an_mcp_tool_error_is_the_error_json_in_a_text_block_without_structured_content(
    error: ErrorInfo, wire: dict[str, Any]
) -> None:
    result = tool_error_result(error)
    assert result.is_error and result.structured_content is None
    (block,) = result.content
    assert block.type == "text" and json.loads(block.text) == {"error": wire}
    assert tool_error(result) == wire


@pytest.mark.parametrize(("error", "wire"), [(FULL, FULL_JSON), (BARE, BARE_JSON)])
def test_an_acs_error_is_the_envelope_as_structured_content_and_text(
    error: ErrorInfo, wire: dict[str, Any]
) -> None:
    envelope = acs_envelope(error)
    assert envelope == {"status": "error", "error": wire}
    result = tool_error_result(error, envelope)
    assert result.is_error and result.structured_content == envelope
    (block,) = result.content
    assert block.type == "text" and json.loads(block.text) == envelope
    assert tool_error(result) == wire


@pytest.mark.parametrize(("error", "wire"), [(FULL, FULL_JSON), (BARE, BARE_JSON)])
def test_an_http_error_is_the_error_body_with_the_codes_status(
    error: ErrorInfo, wire: dict[str, Any]
) -> None:
    response = http_error(error)
    assert response.status_code == HTTP_STATUS.get(error.code, 500)
    assert response.headers["content-type"] == "application/json"
    assert json.loads(response.body) == error_body(error) == {"error": wire}
    assert http_error_info(bytes(response.body).decode()) == error


def test_http_status_follows_the_code_unless_the_caller_knows_better() -> None:
    def status(code: ErrorCode, given: int | None = None) -> int:
        return http_error(ErrorInfo(code=code, message="m"), given).status_code

    assert [status(code) for code in (ErrorCode.INVALID_ARGUMENT, ErrorCode.PERMISSION_DENIED)] == [400, 403]
    assert [status(code) for code in (ErrorCode.SESSION_NOT_FOUND, ErrorCode.RIG_FAILED)] == [404, 502]
    assert [status(code) for code in (ErrorCode.QUEUE_TIMEOUT, ErrorCode.RUNTIME_UNAVAILABLE)] == [503, 503]
    assert status(ErrorCode.CAPTURE_FAILED) == 500
    assert status(ErrorCode.INVALID_PATH, 404) == 404  # a file that is not there, say
    challenged = http_error(BARE, 401, {"www-authenticate": "Bearer"})
    assert (challenged.status_code, challenged.headers["www-authenticate"]) == (401, "Bearer")


@pytest.mark.parametrize(
    "body",
    [
        "",
        "<html>Bad Gateway</html>",
        '{"error": "no such rig"}',
        '{"error": {"code": "MISDIRECTED_REQUEST", "message": "not in the table"}}',
        '["error"]',
        '"error"',
        '{"detail": "Not Found"}',
    ],
)
def test_a_body_that_is_no_deskrig_error_reads_as_none(body: str) -> None:
    assert http_error_info(body) is None


class Region(BaseModel):
    width: int = Field(gt=0)
    height: int = Field(gt=0)


def test_validation_errors_are_formatted_once_for_models_and_requests() -> None:
    with pytest.raises(ValidationError) as refused:
        Region.model_validate({"width": 0})
    error = invalid_argument(refused.value)
    assert error.code is ErrorCode.INVALID_ARGUMENT
    problems = [
        {"field": "width", "problem": "Input should be greater than 0"},
        {"field": "height", "problem": "Field required"},
    ]
    assert error.details == {"problems": problems}
    assert error.message == "invalid arguments: width: Input should be greater than 0; height: Field required"

    # FastAPI's request errors name where the value was (body, query ...) first.
    request = RequestValidationError(
        [{**problem, "loc": ("body", *problem["loc"])} for problem in refused.value.errors()]
    )
    error = invalid_argument(request, "invalid request")
    assert [p["field"] for p in error.details["problems"]] == ["body.width", "body.height"]  # type: ignore[index]
    assert error.message.startswith("invalid request: body.width: Input should be greater than 0; ")

    # A problem with the input as a whole has an empty path: ``whole`` names it.
    with pytest.raises(ValidationError) as whole:
        Region.model_validate([1, 2])
    assert invalid_argument(whole.value, whole="(action.json)").details == {
        "problems": [
            {"field": "(action.json)", "problem": "Input should be a valid dictionary or instance of Region"}
        ]
    }
