//! The ARM client against scripted ARM answers (wiremock): async operations by both protocols,
//! `Retry-After`, error classification, already-gone deletes, paging, lossless round trips, and
//! the headers every call carries.
//!
//! The tests sit in a `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod scripted_arm {
    use nodewright_model::arm::poll_schedule::OperationKind;
    use std::time::{Duration, Instant};

    use nodewright_activities::azure::inventory::{
        ListInventoryPage, MAX_PAGES_PER_CALL, list_inventory_page,
    };
    use nodewright_activities::azure::virtual_machines::{
        AttachDetachDataDisks, DataDisk, DataDiskToDetach, VirtualMachine,
    };
    use nodewright_activities::azure::{
        ArmClient, ArmConfig, CallError, Credential, Deletion, Error, PollProtocol, Progress,
    };
    use nodewright_model::arm::Disposition;
    use nodewright_model::sweep::ResourceKind;
    use serde_json::{Value, json};
    use wiremock::matchers::{header, method, path, query_param};
    use wiremock::{Mock, MockServer, Request, ResponseTemplate};

    const VMS: &str =
        "/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Compute/virtualMachines";
    const DISKS: &str =
        "/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Compute/disks";
    const NICS: &str =
        "/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Network/networkInterfaces";
    const OPERATION: &str = "/providers/Microsoft.Compute/locations/westeurope/operations/op-1";
    const WAIT: Duration = Duration::from_secs(10);

    fn client(server: &MockServer) -> ArmClient {
        let endpoint = server
            .uri()
            .parse()
            .expect("the mock server's URI is a URL");
        ArmClient::new(
            ArmConfig::new(endpoint, "sub-1", "rg-1"),
            Credential::fixed("fake-token"),
        )
        .expect("client")
    }

    fn vm_body(state: &str) -> Value {
        json!({
            "id": format!("{VMS}/vm-1"),
            "name": "vm-1",
            "type": "Microsoft.Compute/virtualMachines",
            "location": "westeurope",
            "tags": { "nodewright.io-cluster": "prod" },
            "plan": { "name": "p", "publisher": "q", "product": "r" },
            "properties": {
                "provisioningState": state,
                "hardwareProfile": { "vmSize": "Standard_D4s_v5" },
                "securityProfile": { "uefiSettings": { "secureBootEnabled": true } },
                "storageProfile": { "dataDisks": [], "diskControllerType": "NVMe" }
            }
        })
    }

    fn arm_error(status: u16, code: &str, message: &str) -> ResponseTemplate {
        ResponseTemplate::new(status)
            .insert_header("x-ms-request-id", "req-42")
            .set_body_json(json!({ "error": { "code": code, "message": message } }))
    }

    async fn once(server: &MockServer, verb: &str, at: &str, answer: ResponseTemplate) {
        Mock::given(method(verb))
            .and(path(at))
            .respond_with(answer)
            .up_to_n_times(1)
            .mount(server)
            .await;
    }

    async fn requests(server: &MockServer) -> Vec<Request> {
        server.received_requests().await.unwrap_or_default()
    }

    fn operation_status(status: &str) -> ResponseTemplate {
        ResponseTemplate::new(200)
            .insert_header("retry-after", "0")
            .set_body_json(json!({ "name": "op-1", "status": status }))
    }

    #[tokio::test]
    async fn put_vm_polls_azure_async_operation_until_succeeded() {
        let server = MockServer::start().await;
        let operation_url = format!("{}{OPERATION}?api-version=2024-07-01", server.uri());
        Mock::given(method("PUT"))
            .and(path(format!("{VMS}/vm-1")))
            .and(query_param("api-version", "2024-07-01"))
            .and(header("authorization", "Bearer fake-token"))
            .respond_with(
                ResponseTemplate::new(201)
                    .insert_header("azure-asyncoperation", operation_url.as_str())
                    .insert_header("retry-after", "0")
                    .set_body_json(vm_body("Creating")),
            )
            .mount(&server)
            .await;
        once(&server, "GET", OPERATION, operation_status("InProgress")).await;
        once(&server, "GET", OPERATION, operation_status("Succeeded")).await;
        let arm = client(&server);
        let vm: VirtualMachine = serde_json::from_value(vm_body("")).expect("body");

        let submitted = arm.put_vm("vm-1", &vm).await.expect("PUT accepted");
        assert_eq!(submitted.status, 201);
        let created = submitted.resource.expect("201 carries the VM");
        assert_eq!(
            created.properties.provisioning_state.as_deref(),
            Some("Creating")
        );
        let handle = submitted.operation.expect("an operation to poll");
        assert_eq!(handle.protocol, PollProtocol::AzureAsyncOperation);
        assert_eq!(handle.url, operation_url);
        assert_eq!(handle.retry_after_seconds, Some(0));
        assert_eq!(
            arm.poll_once(&handle).await.expect("poll"),
            Progress::Running {
                retry_after: Some(Duration::ZERO)
            }
        );
        assert_eq!(
            arm.wait(&handle, OperationKind::VmCreate, WAIT)
                .await
                .expect("succeeds"),
            None
        );
        let sent = requests(&server).await;
        assert_eq!(
            sent.len(),
            3,
            "one PUT and two polls; the PUT is never re-sent"
        );
        assert!(
            sent.iter()
                .all(|r| r.headers.contains_key("x-ms-correlation-request-id"))
        );
    }

    #[tokio::test]
    async fn put_vm_operation_that_fails_is_terminal_with_its_arm_code() {
        let server = MockServer::start().await;
        let operation_url = format!("{}{OPERATION}", server.uri());
        once(
            &server,
            "PUT",
            &format!("{VMS}/vm-1"),
            ResponseTemplate::new(201)
                .insert_header("azure-asyncoperation", operation_url.as_str())
                .insert_header("retry-after", "0")
                .set_body_json(vm_body("Creating")),
        )
        .await;
        once(
            &server,
            "GET",
            OPERATION,
            ResponseTemplate::new(200)
                .insert_header("x-ms-request-id", "req-7")
                .set_body_json(json!({ "status": "Failed", "error": { "code": "AllocationFailed", "message": "no capacity in zone 2" } })),
        )
        .await;
        let arm = client(&server);
        let vm: VirtualMachine = serde_json::from_value(vm_body("")).expect("body");
        let handle = arm
            .put_vm("vm-1", &vm)
            .await
            .expect("PUT accepted")
            .operation
            .expect("a handle");

        let error = arm
            .wait(&handle, OperationKind::VmCreate, WAIT)
            .await
            .expect_err("the operation failed");
        assert!(matches!(error, Error::OperationFailed { .. }), "{error:?}");
        assert_eq!(error.disposition(), Disposition::Terminal);
        let failure = error.arm_failure().expect("ARM's reason");
        assert_eq!(
            (
                failure.code.as_str(),
                failure.message.as_str(),
                failure.request_id.as_deref()
            ),
            ("AllocationFailed", "no capacity in zone 2", Some("req-7"))
        );
    }

    async fn delete_vm_polled_by_location(last: ResponseTemplate) -> Option<Value> {
        let server = MockServer::start().await;
        let location = format!("{}{OPERATION}?monitor=true", server.uri());
        Mock::given(method("DELETE"))
            .and(path(format!("{VMS}/vm-1")))
            .and(query_param("forceDeletion", "true"))
            .respond_with(
                ResponseTemplate::new(202)
                    .insert_header("location", location.as_str())
                    .insert_header("retry-after", "0"),
            )
            .mount(&server)
            .await;
        once(
            &server,
            "GET",
            OPERATION,
            ResponseTemplate::new(202).insert_header("retry-after", "0"),
        )
        .await;
        once(&server, "GET", OPERATION, last).await;
        let arm = client(&server);
        let Deletion::Started(handle) = arm.delete_vm("vm-1", true).await.expect("accepted") else {
            panic!("a 202 with Location is a started delete");
        };
        assert_eq!(handle.protocol, PollProtocol::Location);
        assert_eq!(handle.url, location);
        arm.wait(&handle, OperationKind::VmDelete, WAIT)
            .await
            .expect("finishes")
    }

    #[tokio::test]
    async fn delete_vm_polls_location_until_200_and_returns_its_body() {
        let result = delete_vm_polled_by_location(
            ResponseTemplate::new(200).set_body_json(json!({ "done": true })),
        )
        .await;
        assert_eq!(result, Some(json!({ "done": true })));
    }

    #[tokio::test]
    async fn delete_vm_polls_location_until_204() {
        let result = delete_vm_polled_by_location(ResponseTemplate::new(204)).await;
        assert_eq!(result, None);
    }

    #[tokio::test]
    async fn retry_after_is_honoured_between_polls_and_surfaced_on_the_handle() {
        let server = MockServer::start().await;
        let location = format!("{}{OPERATION}", server.uri());
        once(
            &server,
            "DELETE",
            &format!("{DISKS}/d-1"),
            ResponseTemplate::new(202)
                .insert_header("location", location.as_str())
                .insert_header("retry-after", "1"),
        )
        .await;
        once(&server, "GET", OPERATION, ResponseTemplate::new(204)).await;
        let arm = client(&server);
        let Deletion::Started(handle) = arm.delete_disk("d-1").await.expect("accepted") else {
            panic!("a 202 with Location is a started delete");
        };
        assert_eq!(handle.retry_after_seconds, Some(1));

        let started = Instant::now();
        arm.wait(&handle, OperationKind::VmCreate, WAIT)
            .await
            .expect("finishes");
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "waited Retry-After before polling"
        );
        let timed_out = arm
            .wait(&handle, OperationKind::VmCreate, Duration::from_millis(500))
            .await;
        assert!(
            matches!(timed_out, Err(Error::WaitTimedOut { .. })),
            "{timed_out:?}"
        );
    }

    #[tokio::test]
    async fn a_huge_retry_after_times_the_wait_out_instead_of_overflowing() {
        let server = MockServer::start().await;
        let location = format!("{}{OPERATION}", server.uri());
        once(
            &server,
            "DELETE",
            &format!("{DISKS}/d-1"),
            ResponseTemplate::new(202)
                .insert_header("location", location.as_str())
                .insert_header("retry-after", "1"),
        )
        .await;
        // After the first poll more than a second has passed: elapsed + u64::MAX s overflows.
        once(
            &server,
            "GET",
            OPERATION,
            ResponseTemplate::new(202).insert_header("retry-after", u64::MAX.to_string().as_str()),
        )
        .await;
        let arm = client(&server);
        let Deletion::Started(handle) = arm.delete_disk("d-1").await.expect("accepted") else {
            panic!("a 202 with Location is a started delete");
        };
        let waited = arm.wait(&handle, OperationKind::Disk, WAIT).await;
        assert!(
            matches!(waited, Err(Error::WaitTimedOut { .. })),
            "{waited:?}"
        );
    }

    #[tokio::test]
    async fn a_list_whose_next_links_form_a_cycle_ends() {
        let server = MockServer::start().await;
        let first = format!("{}{DISKS}?api-version=2024-03-02", server.uri());
        let second = format!("{first}&$skiptoken=page2");
        let disk = |name: &str| json!({ "name": name, "location": "westeurope", "properties": {} });
        Mock::given(method("GET"))
            .and(path(DISKS))
            .and(query_param("$skiptoken", "page2"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({ "value": [disk("d-2")], "nextLink": first })),
            )
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(DISKS))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({ "value": [disk("d-1")], "nextLink": second })),
            )
            .mount(&server)
            .await;
        let listed = tokio::time::timeout(WAIT, client(&server).list_disks())
            .await
            .expect("the cycle ends")
            .expect("listed");
        let names: Vec<_> = listed.into_iter().filter_map(|d| d.name).collect();
        assert_eq!(names, ["d-1", "d-2"]);
        assert_eq!(requests(&server).await.len(), 2);
    }

    #[tokio::test]
    async fn an_inventory_call_ends_at_a_next_link_back_to_a_page_it_read_and_returns_it() {
        let server = MockServer::start().await;
        let first = format!("{}{DISKS}?api-version=2024-03-02", server.uri());
        Mock::given(method("GET"))
            .and(path(DISKS))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({ "value": [], "nextLink": first })),
            )
            .mount(&server)
            .await;
        let input = ListInventoryPage {
            kind: ResourceKind::Disk,
            next_link: None,
            max_items: 1000,
        };
        let page = tokio::time::timeout(WAIT, list_inventory_page(&client(&server), &input))
            .await
            .expect("the call ends")
            .expect("listed");
        assert!(page.resources.is_empty());
        assert_eq!(page.next_link.as_deref(), Some(first.as_str()));
        assert_eq!(page.pages, 1);
        let again = ListInventoryPage {
            next_link: page.next_link,
            ..input
        };
        let page = tokio::time::timeout(WAIT, list_inventory_page(&client(&server), &again))
            .await
            .expect("the call ends")
            .expect("listed");
        assert_eq!(page.next_link.as_deref(), Some(first.as_str()));
        assert_eq!(requests(&server).await.len(), 2, "one request a call");
    }

    #[tokio::test]
    async fn an_inventory_call_follows_at_most_twenty_pages_of_an_endless_chain() {
        let server = MockServer::start().await;
        let uri = server.uri();
        // Every page is empty and links to a new one: page=1, page=2, ...
        Mock::given(method("GET"))
            .and(path(DISKS))
            .respond_with(move |request: &Request| {
                let page: u32 = request
                    .url
                    .query_pairs()
                    .find(|(name, _)| name == "page")
                    .and_then(|(_, value)| value.parse().ok())
                    .unwrap_or(0);
                let next = format!("{uri}{DISKS}?api-version=2024-03-02&page={}", page + 1);
                ResponseTemplate::new(200).set_body_json(json!({ "value": [], "nextLink": next }))
            })
            .mount(&server)
            .await;
        let input = ListInventoryPage {
            kind: ResourceKind::Disk,
            next_link: None,
            max_items: 1000,
        };
        let page = tokio::time::timeout(WAIT, list_inventory_page(&client(&server), &input))
            .await
            .expect("the call ends")
            .expect("listed");
        assert_eq!(page.pages, MAX_PAGES_PER_CALL);
        assert_eq!(requests(&server).await.len(), 20);
        assert!(
            page.next_link
                .as_deref()
                .is_some_and(|link| link.ends_with("page=20")),
            "{:?}",
            page.next_link
        );
    }

    #[tokio::test]
    async fn throttling_server_errors_and_conflicts_are_classified() {
        let server = MockServer::start().await;
        let throttled = arm_error(429, "OperationNotAllowed", "too many requests")
            .insert_header("retry-after", "17");
        let table = [
            (throttled, Disposition::Retryable, Some(17)),
            (
                arm_error(500, "InternalServerError", "oops"),
                Disposition::Retryable,
                None,
            ),
            (
                arm_error(503, "ServiceUnavailable", "busy"),
                Disposition::Retryable,
                None,
            ),
            (
                arm_error(409, "AnotherOperationInProgress", "an update is running"),
                Disposition::Retryable,
                None,
            ),
            (
                arm_error(
                    409,
                    "OperationNotAllowed",
                    "Disk d-1 is attached to VM vm-1",
                ),
                Disposition::Terminal,
                None,
            ),
            (
                arm_error(400, "InvalidParameter", "bad size"),
                Disposition::Terminal,
                None,
            ),
            (
                arm_error(404, "ResourceNotFound", "no such VM"),
                Disposition::Gone,
                None,
            ),
        ];
        let arm = client(&server);
        for (answer, expected, retry_after) in table {
            server.reset().await;
            once(&server, "GET", &format!("{VMS}/vm-1"), answer).await;
            let error = arm.get_vm("vm-1").await.expect_err("an error answer");
            assert!(matches!(error, Error::GetVm { .. }));
            assert_eq!(error.disposition(), expected, "{error:?}");
            assert_eq!(error.retry_after(), retry_after.map(Duration::from_secs));
            assert_eq!(
                error.arm_failure().and_then(|f| f.request_id.as_deref()),
                Some("req-42")
            );
        }
    }

    #[tokio::test]
    async fn errors_carry_status_code_message_and_request_id() {
        let server = MockServer::start().await;
        once(
            &server,
            "PUT",
            &format!("{NICS}/nic-1"),
            arm_error(400, "InvalidParameter", "subnet is required"),
        )
        .await;
        let arm = client(&server);
        let nic = serde_json::from_value(json!({ "location": "westeurope", "properties": {} }))
            .expect("body");
        let error = arm.put_nic("nic-1", &nic).await.expect_err("rejected");
        let failure = error.arm_failure().expect("ARM answered");
        assert_eq!(
            (
                failure.status,
                failure.code.as_str(),
                failure.message.as_str()
            ),
            (400, "InvalidParameter", "subnet is required")
        );
        assert_eq!(failure.request_id.as_deref(), Some("req-42"));
        assert_eq!(error.type_name(), "PutNic");
        let _activity_error = error.into_activity_error();
    }

    #[tokio::test]
    async fn a_delete_of_a_missing_resource_is_already_gone() {
        let server = MockServer::start().await;
        for at in [
            format!("{NICS}/nic-1"),
            format!("{DISKS}/d-1"),
            format!("{VMS}/vm-1"),
        ] {
            once(
                &server,
                "DELETE",
                &at,
                arm_error(404, "ResourceNotFound", "gone"),
            )
            .await;
        }
        let arm = client(&server);
        assert_eq!(
            arm.delete_nic("nic-1").await.expect("gone is fine"),
            Deletion::AlreadyGone
        );
        assert_eq!(
            arm.delete_disk("d-1").await.expect("gone is fine"),
            Deletion::AlreadyGone
        );
        assert_eq!(
            arm.delete_vm("vm-1", false).await.expect("gone is fine"),
            Deletion::AlreadyGone
        );
        once(
            &server,
            "DELETE",
            &format!("{DISKS}/d-2"),
            ResponseTemplate::new(204),
        )
        .await;
        assert_eq!(
            arm.delete_disk("d-2").await.expect("deleted"),
            Deletion::Deleted
        );
    }

    #[tokio::test]
    async fn a_list_follows_next_link_across_two_pages() {
        let server = MockServer::start().await;
        let next = format!(
            "{}{DISKS}?api-version=2024-03-02&$skiptoken=page2",
            server.uri()
        );
        let disk = |name: &str| json!({ "name": name, "location": "westeurope", "properties": {} });
        Mock::given(method("GET"))
            .and(path(DISKS))
            .and(query_param("$skiptoken", "page2"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({ "value": [disk("d-3")] })),
            )
            .mount(&server)
            .await;
        once(
            &server,
            "GET",
            DISKS,
            ResponseTemplate::new(200)
                .set_body_json(json!({ "value": [disk("d-1"), disk("d-2")], "nextLink": next })),
        )
        .await;
        let arm = client(&server);
        let names: Vec<_> = arm
            .list_disks()
            .await
            .expect("two pages")
            .into_iter()
            .filter_map(|d| d.name)
            .collect();
        assert_eq!(names, ["d-1", "d-2", "d-3"]);
        assert_eq!(requests(&server).await.len(), 2);
    }

    #[tokio::test]
    async fn unknown_fields_survive_a_get_then_put() {
        let server = MockServer::start().await;
        once(
            &server,
            "GET",
            &format!("{VMS}/vm-1"),
            ResponseTemplate::new(200).set_body_json(vm_body("Succeeded")),
        )
        .await;
        once(
            &server,
            "PUT",
            &format!("{VMS}/vm-1"),
            ResponseTemplate::new(200).set_body_json(vm_body("Updating")),
        )
        .await;
        let arm = client(&server);
        let mut vm = arm.get_vm("vm-1").await.expect("read");
        vm.tags
            .insert("nodewright.io-template".to_owned(), "9f86d0".to_owned());
        let submitted = arm.put_vm("vm-1", &vm).await.expect("written");
        assert_eq!(submitted.operation, None, "a 200 without headers is done");

        let put = requests(&server)
            .await
            .into_iter()
            .find(|r| r.method.as_str() == "PUT")
            .expect("a PUT was sent");
        let mut expected = vm_body("Succeeded");
        expected["tags"]["nodewright.io-template"] = json!("9f86d0");
        assert_eq!(put.body_json::<Value>().expect("JSON body"), expected);
    }

    #[tokio::test]
    async fn disk_tags_are_set_by_one_patch_of_the_tags_object_only() {
        let server = MockServer::start().await;
        once(
            &server,
            "PATCH",
            &format!("{DISKS}/web-abc12-osdisk"),
            ResponseTemplate::new(200).set_body_json(json!({
                "name": "web-abc12-osdisk", "location": "westeurope",
                "tags": { "team": "x", "nodewright.io-cluster": "prod" },
                "properties": { "provisioningState": "Succeeded" }
            })),
        )
        .await;
        let arm = client(&server);
        let tags = [("team", "x"), ("nodewright.io-cluster", "prod")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let submitted = arm
            .patch_disk_tags("web-abc12-osdisk", &tags)
            .await
            .expect("patched");
        assert_eq!(submitted.operation, None, "a 200 without headers is done");
        let sent = requests(&server).await;
        assert_eq!(sent.len(), 1, "one PATCH, no PUT");
        assert_eq!(sent[0].method.as_str(), "PATCH");
        assert_eq!(
            sent[0].body_json::<Value>().expect("JSON body"),
            json!({ "tags": { "team": "x", "nodewright.io-cluster": "prod" } }),
            "the whole tags object and nothing else"
        );
    }

    #[tokio::test]
    async fn every_call_carries_the_token_api_version_and_correlation_id() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "value": [] })))
            .mount(&server)
            .await;
        let arm = client(&server).with_correlation_id("wf-1");
        arm.list_vms().await.expect("VMs");
        arm.list_nics().await.expect("NICs");
        arm.list_disks().await.expect("disks");
        let versions: Vec<_> = requests(&server)
            .await
            .iter()
            .map(|r| {
                assert_eq!(r.headers["authorization"], "Bearer fake-token");
                assert_eq!(r.headers["x-ms-correlation-request-id"], "wf-1");
                r.url
                    .query_pairs()
                    .find(|(k, _)| k == "api-version")
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(versions, ["2024-07-01", "2024-03-01", "2024-03-02"]);
    }

    #[tokio::test]
    async fn instance_view_is_read_with_expand() {
        let server = MockServer::start().await;
        let mut body = vm_body("Succeeded");
        body["properties"]["instanceView"] =
            json!({ "statuses": [{ "code": "PowerState/deallocated" }] });
        Mock::given(method("GET"))
            .and(path(format!("{VMS}/vm-1")))
            .and(query_param("$expand", "instanceView"))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .mount(&server)
            .await;
        let vm = client(&server)
            .get_vm_with_instance_view("vm-1")
            .await
            .expect("read");
        let view = vm.properties.instance_view.expect("an instance view");
        assert_eq!(view.power_state(), Some("deallocated"));
    }

    #[tokio::test]
    async fn data_disks_detach_by_patch_and_by_attach_detach_action() {
        let server = MockServer::start().await;
        let location = format!("{}{OPERATION}", server.uri());
        once(
            &server,
            "PATCH",
            &format!("{VMS}/vm-1"),
            ResponseTemplate::new(200).set_body_json(vm_body("Updating")),
        )
        .await;
        once(
            &server,
            "POST",
            &format!("{VMS}/vm-1/attachDetachDataDisks"),
            ResponseTemplate::new(202)
                .insert_header("location", location.as_str())
                .insert_header("retry-after", "0"),
        )
        .await;
        once(
            &server,
            "GET",
            OPERATION,
            ResponseTemplate::new(200).set_body_json(json!({ "dataDisks": [] })),
        )
        .await;
        let arm = client(&server);
        let mut disk = DataDisk::attach(0, arm.disk_id("d-1"), "Detach");
        disk.mark_detached(true);
        arm.set_data_disks("vm-1", &[disk]).await.expect("patched");
        let change = AttachDetachDataDisks {
            data_disks_to_detach: vec![DataDiskToDetach {
                disk_id: arm.disk_id("d-1"),
                detach_option: Some("ForceDetach".to_owned()),
            }],
            ..AttachDetachDataDisks::default()
        };
        let submitted = arm
            .attach_detach_data_disks("vm-1", &change)
            .await
            .expect("accepted");
        let handle = submitted.operation.expect("a Location to poll");
        let result = arm
            .wait(&handle, OperationKind::VmAction, WAIT)
            .await
            .expect("done");
        assert_eq!(result, Some(json!({ "dataDisks": [] })));

        let sent = requests(&server).await;
        let patch = sent[0].body_json::<Value>().expect("JSON");
        assert_eq!(
            patch["properties"]["storageProfile"]["dataDisks"][0],
            json!({ "lun": 0, "createOption": "Attach", "managedDisk": { "id": format!("{DISKS}/d-1") },
                    "deleteOption": "Detach", "toBeDetached": true, "detachOption": "ForceDetach" })
        );
        assert_eq!(
            sent[1].body_json::<Value>().expect("JSON"),
            json!({ "dataDisksToDetach": [{ "diskId": format!("{DISKS}/d-1"), "detachOption": "ForceDetach" }] })
        );
    }

    #[tokio::test]
    async fn transport_failures_are_retryable_and_foreign_poll_urls_are_refused() {
        // Nothing listens on port 9 of localhost (discard): the connection is refused.
        let config = ArmConfig::new("http://127.0.0.1:9/".parse().expect("url"), "sub-1", "rg-1");
        let arm = ArmClient::new(config, Credential::fixed("t")).expect("client");
        let error = arm.get_disk("d-1").await.expect_err("no server");
        assert!(
            matches!(
                error,
                Error::GetDisk {
                    source: CallError::Transport(_),
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(error.disposition(), Disposition::Retryable);

        let server = MockServer::start().await;
        once(
            &server,
            "DELETE",
            &format!("{NICS}/nic-1"),
            ResponseTemplate::new(202).insert_header("location", "https://elsewhere.example/op"),
        )
        .await;
        let error = client(&server)
            .delete_nic("nic-1")
            .await
            .expect_err("refused");
        assert!(
            matches!(
                error,
                Error::DeleteNic {
                    source: CallError::ForeignUrl { .. },
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(error.disposition(), Disposition::Terminal);
    }
}
