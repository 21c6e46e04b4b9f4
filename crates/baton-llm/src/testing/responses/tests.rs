use super::*;

/// POSTs `body` to `path` of `server` with `key` as bearer; (status, response body text).
fn post(server: &ResponsesServer, path: &str, key: Option<&str>, body: &Value) -> (u16, String) {
    let port = server
        .base_url()
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/v1")
        .to_string();
    let mut stream = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    let body = body.to_string();
    let auth = key
        .map(|k| format!("authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{auth}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let (head, rest) = reply.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, rest.to_string())
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// The `data:` payloads of an SSE body.
fn data(sse: &str) -> Vec<Value> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[test]
fn a_streamed_answer_has_the_api_event_sequence_with_usage() {
    let server = ResponsesServer::start(vec![answer(vec![
        message("Hello there"),
        exec_command("call_1", "ls"),
        apply_patch("call_2", &add_file_patch("a.txt", "a")),
    ])])
    .unwrap();
    let (status, sse) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "stream": true, "input": [user("hi")]}),
    );
    assert_eq!(status, 200);
    let events = data(&sse);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    // The SSE `event:` name is each payload's type, and sequence numbers count from 0.
    let names: Vec<&str> = sse
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(names, kinds);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], i as u64);
    }
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello there");
    let call = &events[15]["item"];
    assert_eq!(call["name"], "exec_command");
    assert_eq!(call["call_id"], "call_1");
    assert_eq!(call["arguments"], r#"{"cmd":"ls"}"#);
    assert_eq!(events[21]["item"]["type"], "custom_tool_call");
    assert_eq!(events[0]["response"]["status"], "in_progress");
    let done = &events[22]["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"].as_array().unwrap().len(), 3);
    let usage = &done["usage"];
    assert!(usage["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], 0);
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap()
    );
    assert_eq!(server.remaining(), 0);
    assert_eq!(server.exchanges()[0].status, 200);
}

#[test]
fn a_request_not_streamed_gets_the_response_object() {
    let server = ResponsesServer::start(vec![with_reasoning_tokens(text("plain"), 40)]).unwrap();
    let (status, body) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": "hi"}),
    );
    assert_eq!(status, 200);
    let response: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(response["object"], "response");
    assert_eq!(response["model"], "m");
    assert_eq!(response["output"][0]["content"][0]["text"], "plain");
    assert_eq!(
        response["usage"]["output_tokens_details"]["reasoning_tokens"],
        40
    );
    assert!(response["usage"]["output_tokens"].as_u64().unwrap() > 40);
}

#[test]
fn a_long_prompt_sent_again_is_reported_cached() {
    let long = "x".repeat(20_000);
    let server = ResponsesServer::start(vec![text("a"), text("b")]).unwrap();
    let first = json!({"model": "m", "instructions": long, "input": [user("one")]});
    let second = json!({"model": "m", "instructions": long, "input": [user("one"), user("two")]});
    let usage = |body: &Value| {
        let (_, r) = post(&server, "/v1/responses", None, body);
        serde_json::from_str::<Value>(&r).unwrap()["usage"].clone()
    };
    assert_eq!(usage(&first)["input_tokens_details"]["cached_tokens"], 0);
    let cached = usage(&second)["input_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(cached >= 4_096, "{cached}");
}

#[test]
fn a_function_call_without_its_output_is_refused_and_uses_no_answer() {
    let server = ResponsesServer::start(vec![text("never")]).unwrap();
    let call = exec_command("call_9", "ls");
    let (status, body) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": [user("hi"), call]}),
    );
    assert_eq!(status, 400);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(
        error["error"]["message"],
        "No tool output found for function call call_9."
    );
    assert_eq!(server.remaining(), 1);
    assert_eq!(server.exchanges()[0].status, 400);

    // Answered, it passes.
    let output = json!({"type": "function_call_output", "call_id": "call_9", "output": "a.txt"});
    let (status, _) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": [user("hi"), exec_command("call_9", "ls"), output]}),
    );
    assert_eq!(status, 200);
    assert_eq!(
        server.exchanges()[1].tool_output("call_9").as_deref(),
        Some("a.txt")
    );
}

#[test]
fn an_orphan_output_a_custom_call_unanswered_or_answered_by_the_wrong_kind_is_refused() {
    let server = ResponsesServer::start(vec![text("never")]).unwrap();
    let orphan = json!({"type": "function_call_output", "call_id": "call_x", "output": "?"});
    let patch = apply_patch("call_p", &add_file_patch("a", "a"));
    let wrong = json!({"type": "function_call_output", "call_id": "call_p", "output": "done"});
    for (input, message) in [
        (
            json!([orphan]),
            "No tool call found for function_call_output with call_id call_x.",
        ),
        (
            json!([patch.clone()]),
            "No tool output found for custom tool call call_p.",
        ),
        (
            json!([patch, wrong]),
            "No tool call found for function_call_output with call_id call_p.",
        ),
    ] {
        let (status, body) = post(
            &server,
            "/v1/responses",
            None,
            &json!({"model": "m", "input": input}),
        );
        assert_eq!(status, 400);
        let error: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"]["message"], message);
    }
    assert_eq!(server.remaining(), 1);
}

#[test]
fn a_missing_model_an_unknown_previous_response_and_another_route_are_refused() {
    let server =
        ResponsesServer::start(vec![answer(vec![exec_command("c1", "ls")]), text("ok")]).unwrap();
    let (status, body) = post(&server, "/v1/responses", None, &json!({"input": "hi"}));
    assert_eq!(
        (
            status,
            body.contains("Missing required parameter: 'model'.")
        ),
        (400, true)
    );
    let (status, body) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": "hi", "previous_response_id": "resp_nope"}),
    );
    assert_eq!(
        (status, body.contains("previous_response_not_found")),
        (400, true)
    );
    let (status, _) = post(
        &server,
        "/v1/chat/completions",
        None,
        &json!({"model": "m"}),
    );
    assert_eq!(status, 404);

    // A stored response continues, and its calls must be answered.
    let (status, body) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": "hi"}),
    );
    assert_eq!(status, 200);
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, body) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": [], "previous_response_id": id}),
    );
    assert_eq!(
        (
            status,
            body.contains("No tool output found for function call c1.")
        ),
        (400, true)
    );
    let output = json!({"type": "function_call_output", "call_id": "c1", "output": "x"});
    let (status, _) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": [output], "previous_response_id": id}),
    );
    assert_eq!(status, 200);

    // A response not stored cannot be continued.
    let server = ResponsesServer::start(vec![text("a")]).unwrap();
    let (_, body) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": "hi", "store": false}),
    );
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": "more", "previous_response_id": id}),
    );
    assert_eq!(status, 400);
}

#[test]
fn a_configured_key_refuses_another_or_none_with_401() {
    let server = ResponsesServer::start_with_key(vec![text("ok")], "sk-right-1234").unwrap();
    let body = json!({"model": "m", "input": "hi"});
    let (status, text) = post(&server, "/v1/responses", Some("sk-wrong-9876"), &body);
    assert_eq!(status, 401);
    assert!(
        text.contains("invalid_api_key") && text.contains("***9876"),
        "{text}"
    );
    assert!(!text.contains("sk-wrong"));
    assert_eq!(post(&server, "/v1/responses", None, &body).0, 401);
    assert_eq!(server.remaining(), 1);
    assert_eq!(
        post(&server, "/v1/responses", Some("sk-right-1234"), &body).0,
        200
    );
}

#[test]
fn a_scripted_refusal_is_sent_with_its_status_and_body() {
    let server = ResponsesServer::start(vec![refusal(
        429,
        "rate_limit_error",
        Some("rate_limit_exceeded"),
        "Slow down.",
    )])
    .unwrap();
    let (status, body) = post(
        &server,
        "/v1/responses",
        None,
        &json!({"model": "m", "input": "x"}),
    );
    assert_eq!(status, 429);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
}
