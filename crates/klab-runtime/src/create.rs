//! Creates whose reply is read for less than the whole object: a controller's pods (read for the
//! name `generateName` gave them) and a component's Events (not read at all).
//!
//! `Api::create` decodes the reply into the typed object. A pod's decode was most of what a
//! ReplicaSet paid for each pod after its request, and thousands of pods and several Events per
//! pod make that a large share of a big cluster's start. The request is the same as
//! `Api::create`'s (body, URL, query, the `create` extension the clients file requests by); only
//! the reply is decoded into less. An error reply is the same `kube::Error` either way.

use kube::Resource;
use kube::api::{Api, PostParams};
use serde::{Deserialize, Serialize};

/// The created object's name, decoded from the reply without the rest of it.
pub async fn create_for_name<K>(api: &Api<K>, pp: &PostParams, obj: &K) -> kube::Result<String>
where
    K: Resource + Serialize + Clone,
{
    #[derive(Deserialize)]
    struct Meta {
        #[serde(default)]
        name: String,
    }
    #[derive(Deserialize)]
    struct Named {
        metadata: Meta,
    }
    let named: Named = create_as(api, pp, obj).await?;
    Ok(named.metadata.name)
}

/// Creates `obj` and reads nothing of the reply but its status.
pub async fn create_unread<K>(api: &Api<K>, pp: &PostParams, obj: &K) -> kube::Result<()>
where
    K: Resource + Serialize + Clone,
{
    create_as::<K, serde::de::IgnoredAny>(api, pp, obj)
        .await
        .map(drop)
}

async fn create_as<K, T>(api: &Api<K>, pp: &PostParams, obj: &K) -> kube::Result<T>
where
    K: Resource + Serialize + Clone,
    T: serde::de::DeserializeOwned,
{
    let bytes = serde_json::to_vec(obj).map_err(kube::Error::SerdeError)?;
    let mut req = kube::core::Request::new(api.resource_url())
        .create(pp, bytes)
        .map_err(kube::Error::BuildRequest)?;
    req.extensions_mut().insert("create");
    api.clone().into_client().request::<T>(req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Event, ObjectReference};
    use kube::api::ObjectMeta;

    /// The same request as `Api::create`: the object is stored, the generated name comes back,
    /// and an error reply is the API's Status.
    #[tokio::test]
    async fn creates_as_api_create_does() {
        let api = klab_apiserver::testing::memory_server().await;
        let client = kube::Client::new(api.router(), "default");
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let cm = ConfigMap {
            metadata: ObjectMeta {
                generate_name: Some("cfg-".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let name = create_for_name(&cms, &PostParams::default(), &cm)
            .await
            .unwrap();
        assert!(name.starts_with("cfg-") && name.len() == 9, "{name}");
        assert!(cms.get_opt(&name).await.unwrap().is_some());
        let events: Api<Event> = Api::namespaced(client, "default");
        let ev = Event {
            metadata: ObjectMeta {
                name: Some("e1".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("ConfigMap".into()),
                name: Some(name.clone()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            reason: Some("Tested".into()),
            message: Some("created".into()),
            type_: Some("Normal".into()),
            ..Default::default()
        };
        create_unread(&events, &PostParams::default(), &ev)
            .await
            .unwrap();
        assert_eq!(
            events.get("e1").await.unwrap().message.as_deref(),
            Some("created")
        );
        match create_unread(&events, &PostParams::default(), &ev).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"))
            }
            other => panic!("{other:?}"),
        }
    }
}
